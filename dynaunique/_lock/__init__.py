"""The lock scheme: what dynaunique stores and how its keys are spelled. A record's key and
the locks its stored values require, the injective encoding of a value into a lock key,
lock items (``locks``; the writes that put and delete them are the pipeline's); the
vocabulary of items (``items``: model info, owners, which model an item is a record of); the
base of every kind (``kinds``); DynamoDB's size arithmetic (``sizes``). Pure: no I/O, and nothing of
the pipeline or the transport is imported here. The model's planner, the audit's
repairs, the migrations' backfill and the stream guard all build their locks from it,
so they cannot drift apart. No re-exports: import the module you need.
"""
