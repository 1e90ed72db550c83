"""What Runtime's API accepts for a sandbox's size and lease (its reference, 0.2.0).

A spec for provider "runtime" is held to these where the user wrote it, by `RunSpec`'s
validation, rather than refused by the first create hours later. Kept apart from the spec
because they are Runtime's numbers, not overnight's, and change with its API.
"""

from __future__ import annotations

RUNTIME_TIMEOUT_SECONDS = (60, 3600)
RUNTIME_MAX_VCPU = 16
RUNTIME_MEMORY_MIB = (128, 65536)
RUNTIME_MIN_DISK_MIB = 3072


def check_runtime_limits(
    *, sandbox_timeout_seconds: float, vcpu: int, memory_mib: int, disk_mib: int | None
) -> None:
    """Refuse a spec's sizes Runtime's API would refuse (a ValueError naming the field)."""
    # "<field>: <why>": the message names the field even though the check spans two.
    low, high = RUNTIME_TIMEOUT_SECONDS
    if not low <= sandbox_timeout_seconds <= high:
        raise ValueError(
            f"sandbox_timeout_seconds: must be {low} to {high} on provider 'runtime' (a lease; "
            f"a progressing agent's is extended), got {sandbox_timeout_seconds:g}"
        )
    if vcpu > RUNTIME_MAX_VCPU:
        raise ValueError(f"vcpu: may be at most {RUNTIME_MAX_VCPU} on provider 'runtime'")
    low, high = RUNTIME_MEMORY_MIB
    if not low <= memory_mib <= high:
        raise ValueError(f"memory_mib: must be {low} to {high} on provider 'runtime'")
    if disk_mib is not None and disk_mib < RUNTIME_MIN_DISK_MIB:
        raise ValueError(f"disk_mib: must be at least {RUNTIME_MIN_DISK_MIB} on provider 'runtime'")
