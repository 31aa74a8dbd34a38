"""torch.nn.modules.module's path: the names of it that rumus.nn has."""

from ._layout import reexport

__all__ = reexport(globals(), [
    "register_module_forward_pre_hook", "register_module_forward_hook", "register_module_full_backward_pre_hook",
    "register_module_backward_hook", "register_module_full_backward_hook", "register_module_buffer_registration_hook",
    "register_module_module_registration_hook", "register_module_parameter_registration_hook", "Module",
])
