"""``python -m rotate_lab.cluster --dir DIR …``: the cluster process (:mod:`.process`)."""

from rotate_lab.cluster.process import main

if __name__ == "__main__":
    raise SystemExit(main())
