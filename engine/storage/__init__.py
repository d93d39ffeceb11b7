"""Where the engine's own files live, local or on an object store, reached from Python.

:mod:`engine.storage.paths` reads a path or URL once (:class:`~engine.storage.paths.StoragePath`):
whether it is local, the text it is written back as, and the place overlap checks compare. It is
pure Python and this package the bottom layer, so plugins, the compiler and the clients here all
read a path alike (``file:/x`` is the local ``/x`` everywhere).

:mod:`engine.storage.options` turns the deployment's settings (the standard ``AWS_*`` variables)
into the options every client gets alike: Spark's S3A connector, delta-rs and the object-store
client. :mod:`engine.storage.blobs` is the small set of whole-object operations the run lease needs
(list, read, create-if-absent, overwrite, delete) with one implementation per kind of store: a local
directory (``O_EXCL``) and an object store (a conditional put: ``If-None-Match: *``).
"""
