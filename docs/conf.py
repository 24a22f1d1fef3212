"""Sphinx configuration of tessera-explorer's documentation.

`python -m builder site` builds it into the site's docs/ (builder/docs.py): warnings are errors, references
are checked (nitpicky), and nothing in the output is loaded from another origin (the theme's assets are
files of the site)."""
import os
import sys

sys.path.insert(0, os.path.abspath(".."))  # the project's own modules: autodoc and the directive

project = "tessera-explorer"
author = "tessera-explorer contributors"
copyright = "tessera-explorer contributors"

extensions = ["myst_parser", "sphinx.ext.autodoc", "builder.sphinx_ext"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
myst_heading_anchors = 3  # GitHub's anchors: the same links work on GitHub and in the site
myst_enable_extensions = ["colon_fence"]

nitpicky = True
# Types from other projects: their documentation is not part of this site (no intersphinx: nothing is fetched).
nitpick_ignore_regex = [
    ("py:.*", r"(xarray|xr|pandas|pd|numpy|np|zarr|fsspec|dask)\..*"),
    ("py:.*", r"(np\.ndarray|Mapping|Path|Any|Iterable|BackendEntrypoint)"),
    # the core's own classes that the reader's signatures name (builder/core/grid.py, builder/core/layout.py): internals
    ("py:class", r"(builder\.core\.grid\.ZoneGrid|builder\.core\.layout\.Layout|Layout)"),
    ("py:class", r"(builder\.core\.(zone|catalog|source)\.)?(Zone|Entry|Box|Hint)"),
]
autodoc_member_order = "bysource"
autodoc_typehints = "description"

html_theme = "furo"
html_title = "tessera-explorer"
html_copy_source = False
html_show_sourcelink = False
html_static_path = []
html_last_updated_fmt = None

# The explorer beside these pages: `python -m builder site` puts this site in static/docs/, the explorer in
# static/, so a page at the docs' root reaches it as ../index.html (the directive makes it relative per page).
tessera_explorer_url = "../index.html"
