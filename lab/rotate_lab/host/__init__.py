"""The machine the lab runs on: detached processes and their pids (:mod:`.processes`),
and the niceness every lab process and pod runs at (:mod:`.priority`).
"""
