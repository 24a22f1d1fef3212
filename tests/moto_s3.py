"""The tests' object store: moto's S3 API served on 127.0.0.1 (`python tests/moto_s3.py PORT`).

What `python -m moto.server` serves to an S3 client (moto's S3 application on werkzeug's threaded server), without
the dispatcher moto.server puts in front of it to pick a service for each request: that one lists moto's package
directory and stats each of its entries twice a request (moto 5.2, moto_server/werkzeug_app.py,
get_backend_for_host), about 40 % of the server's CPU over the 4,400 requests of a small build to s3://.  The tests
speak S3 alone, the dispatcher's default service too."""
from __future__ import annotations

import os
import sys

from moto.moto_server.werkzeug_app import create_backend_app
from werkzeug.serving import run_simple


def main(port: int) -> None:
    os.environ.setdefault("MOTO_PORT", str(port))  # as moto.server sets it
    run_simple("127.0.0.1", port, create_backend_app("s3"), threaded=True)


if __name__ == "__main__":
    main(int(sys.argv[1]))
