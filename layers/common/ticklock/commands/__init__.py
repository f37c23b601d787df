"""The command line's work beyond ``serve``: a client of the REST API (``client.py``) and the commands that
use it (``jobs.py``), so that the command line works the same against a local process and a deployment."""
