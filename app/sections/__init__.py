"""The sections of the pages too long for one file: a package per page, a module per section,
each section a function the page's script calls (``app/views/`` keeps the page scripts)."""
