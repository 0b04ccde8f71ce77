"""One error type for bad input: the CLI prints its message on one line and exits non-zero."""


class LandscapeError(Exception):
    """A problem with the user's input or environment, stated in one line."""


# Seeds are scaled and offset (1000·seed + draw) into 64-bit generator seeds; below 2**32 every
# derived seed fits, where a larger one overflowed deep inside torch.
SEED_LIMIT = 2**32


def check_seed(seed: int, what: str = "seed") -> int:
    """``seed`` if 0 ≤ seed < 2**32, else a one-line error naming ``what``."""
    if not 0 <= seed < SEED_LIMIT:
        raise LandscapeError(f"{what} must be non-negative and below 2**32, got {seed}")
    return seed
