"""The tools: what helps to look at a program or check it. ``check_grad`` (``checking``),
the debug modes (``debugging``) and pictures of a tape (``graph``). A tool may import
anything public of the engine and the transforms.
"""
