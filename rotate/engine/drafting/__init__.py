"""``rotate init``: a first chain file drafted from a live cluster and its Config Center.

``draft`` reads and decides (ExternalSecrets, Secrets, workloads, Services, documents),
``values`` turns a document back into value sources, ``workloads`` says what each workload
reads, ``render`` writes the draft as commented YAML, ``files`` wires the real sources and
writes the files.  Values are compared by fingerprint only; none is ever written.
"""
