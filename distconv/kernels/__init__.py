"""Pure array kernels (numpy or cupy): no Parameter, no Arg, no layer logic."""
