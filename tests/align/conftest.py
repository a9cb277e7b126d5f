"""tiny_mfcc and one_process (the small ladder in one process) are in tests/conftest.py:
tests/transcribe's SAT model is trained on the same ladder, built once a session."""
