"""The transport: the one boundary to DynamoDB. The one retry loop as sans-IO steps and
its sync driver (``connection``; the asyncio driver is the public
:mod:`dynaunique.aio`), a model's botocore client (``clients``), the request path
below botocore's dispatch (``wire``, behind the fence around botocore's privates,
``botocore``), what DynamoDB answered as values (``answers``),
where a global table's write goes (``regions``) and where the tools send requests
(``endpoint``). It knows nothing of locks or records: nothing of
:mod:`dynaunique._write` or :mod:`dynaunique._lock` is imported here. No re-exports:
import the module you need.
"""
