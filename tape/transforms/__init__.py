"""The transforms: functions of functions, built on the engine.

``grad`` and ``value_and_grad`` (``grad``), ``vjp``, ``jvp``, ``jacobian``, ``hessian``
and ``hvp`` (``derivatives``), ``checkpoint`` and ``stop_gradient`` (``checkpoint``),
forward mode (``forward``, ``pushforward``), ``vmap`` (``vmap``) and compiled replay
(``compiled``). A transform imports the engine (``tape.core``), the rules and other
transforms' public names; never a tool. A new transform is a module here.
"""
