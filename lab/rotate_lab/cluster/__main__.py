"""``python -m rotate_lab.cluster --dir DIR …``: the cluster process (:mod:`.process`)."""

from rotate_lab.cluster.process import main

raise SystemExit(main())
