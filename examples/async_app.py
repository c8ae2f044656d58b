"""An asyncio app: ``asave()`` and ``aget_by_unique()`` under ``asyncio.gather``.

Run it: ``python examples/async_app.py`` (the embedded local server; ``--endpoint URL``, or
``AWS_ENDPOINT_URL_DYNAMODB=URL``, for another DynamoDB; needs the ``async`` extra, httpx). Fifty
signups race for ten emails on one event loop; exactly one signup per email wins, and every loser
gets a ``UniqueViolation``.
"""

from __future__ import annotations

import asyncio

from _local import connected

from dynaunique import Model, UniqueViolation, aio, atomic, normalizers
from dynaunique.attributes import UnicodeAttribute


class Member(Model):
    """A member of a club: the email is unique, case-insensitively."""

    class Meta:
        table_name = "example-async-members"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    email = UnicodeAttribute(unique=True, normalize=normalizers.casefold)


async def join(member_id: int, email: str) -> bool:
    """True when this signup won its email."""
    try:
        await Member(pk=f"MEMBER#{member_id:03}", email=email).asave()
    except UniqueViolation:
        return False
    return True


async def main() -> None:
    async with aio.session():  # the event loop's HTTP client, closed at the end
        emails = [f"member{i}@club.io" for i in range(10)]
        # Five racers per email, case variants included: all 50 at once.
        results = await asyncio.gather(*(
            join(i, emails[i % 10].upper() if i % 2 else emails[i % 10]) for i in range(50)))
        print(f"signups: {len(results)}, winners: {sum(results)}, refused: {results.count(False)}")
        holder = await Member.aget_by_unique("email", "MEMBER3@club.io")
        print("member3@club.io is held by one of its five racers:",
              holder.pk in {f"MEMBER#{i:03}" for i in range(3, 50, 10)})
        # Two members swap emails in one transaction.
        first = await Member.aget_by_unique("email", emails[0])
        second = await Member.aget_by_unique("email", emails[1])
        async with atomic():
            first.email, second.email = second.email, first.email
            await first.asave()
            await second.asave()
        swapped = (await Member.aget_by_unique("email", emails[0])).pk == second.pk
        print("swapped in one transaction:", swapped)


if __name__ == "__main__":
    with connected(__doc__.splitlines()[0], Member):
        asyncio.run(main())
