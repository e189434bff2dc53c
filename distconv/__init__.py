"""distconv: a hackable data-parallel training framework.

Layers run forward and ``backward(callback)`` on NCHW arrays (numpy on the CPU, cupy on a GPU);
each parameter calls ``inc_update(callback)`` the moment its gradient is complete, which is the
seam where a sync strategy (local optimizer, parameter server, allreduce) takes over.
"""

from distconv.arg import Arg
from distconv.parameter import Parameter

__all__ = ["Arg", "Parameter"]
__version__ = "0.1.0"
