"""Blocks of the ``python -c`` scripts that check a SIGTERM handler set outside Python is
given back as the default (the launcher's, a fit's): shared, not copied into each test."""

#: a C handler on SIGTERM that Python reads as None, as an embedding program's is read: set
#: with libc's ``signal()``, then the ``_signal`` module executed again
C_HANDLER_ON_SIGTERM = """\
import ctypes, importlib.util, signal
handler = ctypes.CFUNCTYPE(None, ctypes.c_int)(lambda signum: None)
ctypes.CDLL(None).signal(signal.SIGTERM, handler)
spec = importlib.util.find_spec("_signal")
spec.loader.exec_module(importlib.util.module_from_spec(spec))
assert signal.getsignal(signal.SIGTERM) is None
"""

#: a SIGTERM to itself, which must end the process (-15): a handler that keeps it prints
SIGTERM_ENDS_IT = """\
import os, signal, time
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(2)
print("SIGTERM kept: still running")
"""
