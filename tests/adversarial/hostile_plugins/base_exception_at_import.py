"""Raises a BaseException subclass (not an Exception) while being imported."""


class Doom(BaseException):
    pass


raise Doom("the plugin's import went very wrong")
