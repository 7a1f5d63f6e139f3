"""Errors the API answers with, and the engine's own message texts.

The engine renders a backend validation failure as reason `Operation Failed` with the translated messages as a
Java list, i.e. in square brackets (docs/compatibility.md#engine-faults-and-retries). The HTTP status comes from the
message's error type: CONFLICT -> 409, BAD_PARAMETERS -> 400. Message texts are `AppErrors.properties` after
substitution.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ApiError(Exception):
    """An engine answer other than success. `reason is None` means an empty body (the engine's bare 404)."""

    status: int
    reason: str | None = None
    detail: str | None = None

    def __str__(self) -> str:
        return f"{self.status} {self.reason}: {self.detail}"


def operation_failed(status: int, *messages: str) -> ApiError:
    return ApiError(status, "Operation Failed", "[" + ", ".join(messages) + "]")


def conflict(*messages: str) -> ApiError:
    return operation_failed(409, *messages)


def bad_parameters(*messages: str) -> ApiError:
    return operation_failed(400, *messages)


def not_found() -> ApiError:
    """GET of an unknown id: 404 with an empty body (`AbstractBackendSubResource.performGet`)."""
    return ApiError(404)


def entity_not_found(entity: str, key: str) -> ApiError:
    """A reference inside a request body that does not resolve, e.g. `Entity not found: Cluster: name=foo`."""
    return ApiError(404, "Operation Failed", f"Entity not found: {entity}: {key}")


def incomplete(entity: str, fields: str, operation: str) -> ApiError:
    """`Messages.properties`: `{0} {1} required for {2}`, e.g. `Vm [name] required for add`."""
    return ApiError(400, "Incomplete parameters", f"{entity} [{fields}] required for {operation}")


# Localized VM status names used in VM_STATUS_ILLEGAL (`LocalizedVmStatus`).
_STATUS_NAMES = {
    "image_locked": "Image Locked",
    "wait_for_launch": "Wait For Launch",
    "powering_up": "Powering Up",
    "powering_down": "Powering Down",
    "reboot_in_progress": "Reboot In Progress",
    "not_responding": "Not Responding",
    "saving_state": "Saving State",
    "restoring_state": "Restoring State",
}


def status_name(status: str) -> str:
    return _STATUS_NAMES.get(status, status.replace("_", " ").title())


class Msg:
    """The message texts of `AppErrors.properties` the simulator emits; `action` is run/stop/shutdown/..."""

    @staticmethod
    def vm_is_running(action: str) -> str:
        return f"Cannot {action} VM. VM is running."

    @staticmethod
    def vm_not_running(action: str) -> str:
        return f"Cannot {action} VM. VM is not running."

    @staticmethod
    def vm_status_illegal(action: str, status: str, kind: str = "VM") -> str:
        return f"Cannot {action} {kind} because the VM is in {status_name(status)} status."

    @staticmethod
    def vm_locked(action: str, kind: str = "VM") -> str:
        return f"Cannot {action} {kind}: VM is locked. Please try again in a few minutes."

    @staticmethod
    def disks_locked(action: str, kind: str, aliases: list[str]) -> str:
        return (f"Cannot {action} {kind}: The following disks are locked: {', '.join(aliases)}. "
                "Please try again in a few minutes.")

    VM_NAME_IN_USE = "Cannot add VM. The VM name is already in use, please choose a unique name and try again."
    VM_REMOVE_NOT_DOWN = "Cannot remove VM that its state is not down. -Please stop the VM first."
    VM_DELETE_PROTECTED = ("Cannot remove VM. Delete protection is enabled. In order to delete, disable Delete "
                           "protection first.")
    VM_REMOVE_DETACH_THIN = ("Cannot remove VM. Removing a VM while detaching disks is not supported "
                             "for VMs based on a template.")
    DISK_SIZE_TOO_SMALL = "Cannot extend Virtual Disk. New disk size must be larger than the current disk size."
    MULTIPLE_INIT = "Cannot use multiple initialization tags simultaneously when running VM."
    NO_BOOTABLE_DISK = "Cannot run VM without at least one bootable disk."
    GUARANTEED_ABOVE_MEMORY = "Cannot {action} VM. Physical Memory Guaranteed cannot exceed Memory Size."
    SCHEDULING_FILTERED = ("Cannot run VM. There is no host that satisfies current scheduling constraints. "
                           "See below for details:")
    SCHEDULING_NO_HOSTS = "Cannot run VM. There are no available running Hosts in the Host Cluster."
    AFFINITY_NAME_EXISTS = "Cannot {action} Affinity Group. Affinity Group name already exists."
    AFFINITY_DUPLICATE_VM = "Cannot add Affinity Group. Duplicate VM."
    CPU_UPDATE_NOT_PERMITTED = "Cannot add VM. CPU topology can't be updated when Auto Pinning policy is used."
    AUTO_PIN_NO_HOST = "Cannot edit VM. Auto Pinning policy requires the VM to be pinned to a host."

    @staticmethod
    def name_too_long(action: str, kind: str) -> str:
        return f"Cannot {action} {kind}. The given name is too long."

    @staticmethod
    def memory_above_max(action: str, memory_mb: int, max_mb: int) -> str:
        return f"Cannot {action} VM. Memory size ({memory_mb}MB) cannot exceed maximum memory size ({max_mb}MB)."

    @staticmethod
    def max_memory_above_platform(action: str, max_mb: int, limit_mb: int) -> str:
        return f"Cannot {action} VM. Maximum memory ({max_mb}MB) cannot exceed platform limit ({limit_mb}MB)."

    @staticmethod
    def name_invalid(action: str, kind: str) -> str:
        return (f"Cannot {action} {kind}. The given name contains special characters. Only lower-case and "
                "upper-case letters, numbers, '_', '-', '.' are allowed.")

    @staticmethod
    def low_space(action: str, kind: str, domain: str) -> str:
        return f"Cannot {action} {kind}. Low disk space on Storage Domain {domain}."

    @staticmethod
    def raw_sparse_on_block(action: str, kind: str) -> str:
        return (f"Cannot {action} {kind}. Disk configuration (RAW Sparse) is incompatible with the storage "
                "domain type.")

    @staticmethod
    def disk_already_attached(action: str) -> str:
        return f"Cannot {action} Virtual Disk. The disk is already attached to VM."

    @staticmethod
    def disk_attached_to_running_vm(action: str) -> str:
        return f"Cannot {action} Virtual Disk. Disk is plugged to a running VM, it must be unplugged first."

    @staticmethod
    def nic_name_in_use(action: str) -> str:
        return f"Cannot {action} Interface. The VM already has a network interface with the same name."

    @staticmethod
    def nic_active(action: str) -> str:
        return f"Cannot {action} Interface. Active interface cannot be removed, please unplug it first."

    @staticmethod
    def custom_property_invalid(action: str, names: list[str]) -> str:
        return f"Cannot {action} VM. Custom properties contain invalid values: {', '.join(names)}."

    @staticmethod
    def tag_name_in_use(action: str) -> str:
        return f"Cannot {action} Tag. Tag name is in use."
