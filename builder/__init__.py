"""tessera-explorer builder: turns TESSERA tiles into `tessera:` v1 Zarr stores.

Importing the package is cheap on purpose: the browser app imports
`builder.core.convention` inside Pyodide, where zarr, pyproj and dask do not exist.
"""
__version__ = "0.1.0"
BUILD_VERSION = f"tessera-explorer-{__version__}"
