"""The one exception type that reaches the user as a single readable line."""


class BuildError(Exception):
    """Bad input or an impossible request.  The message names what and where."""

    def __init__(self, message: str, where: str | None = None):
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)
