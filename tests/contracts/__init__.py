"""One contract suite per seam (rotate.clients.seams), run against the fake and the real
adapter alike: a behaviour the engine relies on is checked once, on both, so the fakes the
unit tests use cannot drift from what the real systems do."""
