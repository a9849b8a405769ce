"""Wrong-solution corpora, one module per lab: plausible mistakes learners make, each of which the lab's
check must reject with a message naming its real cause (see ``harness.py``)."""
