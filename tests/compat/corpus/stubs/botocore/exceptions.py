"""Stand-in for botocore.exceptions."""


class ClientError(Exception):
    pass
