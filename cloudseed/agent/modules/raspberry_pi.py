"""raspberry_pi: the Raspberry Pi's interfaces and USB gadget mode (``rpi:``), through ``raspi-config``.

``rpi: {interfaces: {spi, i2c, onewire: BOOL, serial: BOOL | {console, hardware}},
enable_usb_gadget: BOOL}`` as newer cloud-init documents it. Each interface is
``raspi-config nonint do_spi|do_i2c|do_onewire 0`` (enable) or ``1`` (disable). ``serial``:
``do_serial_cons`` for the login console and ``do_serial_hw`` for the UART; ``serial: true`` means
the console, and on a Pi before the Pi 5 (``raspi-config nonint is_pifive`` fails) the console
needs the UART, so it is enabled too. ``enable_usb_gadget`` runs ``rpi-usb-gadget on|off``.

Applies on Raspberry Pi OS only: os-release ID ``raspbian``/``raspberry-pi-os``, or ``debian`` on a
board whose ``/proc/device-tree/model`` names a Raspberry Pi. Elsewhere the keys are reported as
not applicable (a warning in the status). cloud-init reboots right away when something changed;
cloudseed does not cut the boot short: it records ``/var/run/reboot-required`` (so
``package_reboot_if_required`` reboots at the end of the boot) and says so in the log.
"""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_CONFIG, ModuleContext, ModuleError, ModuleSpec
from cloudseed.core.root import CommandError

RASPI_CONFIG = "/usr/bin/raspi-config"
USB_GADGET = "/usr/bin/rpi-usb-gadget"
INTERFACES = {"spi": "do_spi", "i2c": "do_i2c", "onewire": "do_onewire"}
MODEL_FILE = "/proc/device-tree/model"
REBOOT_REQUIRED = "/var/run/reboot-required"
PI_OS_IDS = ("raspbian", "raspberry-pi-os")


def _switch(what: str) -> dict:
    return {"type": "boolean", "description": what}


MODULE = ModuleSpec(
    name="raspberry_pi", stage=STAGE_CONFIG, activate_by=("rpi",), distros=("debian", *PI_OS_IDS),
    title="Raspberry Pi interfaces and USB gadget mode",
    schema={"properties": {"rpi": {
        "type": "object", "additionalProperties": False,
        "description": "Raspberry Pi OS settings made with raspi-config.",
        "properties": {
            "interfaces": {
                "type": "object", "additionalProperties": False,
                "description": "The board's interfaces to switch on (true) or off (false).",
                "properties": {
                    "spi": _switch("The SPI interface."),
                    "i2c": _switch("The I2C interface."),
                    "onewire": _switch("The 1-Wire interface."),
                    "serial": {
                        "description": "The serial port: true/false for the login console (which on boards "
                                       "before the Pi 5 also needs the UART), or the two parts apart.",
                        "oneOf": [
                            {"type": "boolean"},
                            {"type": "object", "additionalProperties": False, "properties": {
                                "console": _switch("A login console on the serial port."),
                                "hardware": _switch("The serial hardware (UART)."),
                            }},
                        ],
                    },
                },
            },
            "enable_usb_gadget": _switch("USB gadget mode (the Pi as a USB Ethernet device), with "
                                         "rpi-usb-gadget."),
        },
    }}},
    examples=(
        """\
#cloud-config
rpi:
  interfaces:
    spi: true
    i2c: true
    onewire: false
    serial:
      console: false
      hardware: true
  enable_usb_gadget: true
""",
    ),
)


def is_pi_os(ctx: ModuleContext) -> str | None:
    """Why this is not Raspberry Pi OS (None: it is)."""
    distro_id = ctx.distro.id
    if distro_id in PI_OS_IDS:
        return None
    model = ctx.root.read_text(MODEL_FILE, default="").replace("\x00", "").strip()
    if distro_id == "debian" and "raspberry pi" in model.lower():
        return None
    return (f"this is {distro_id}" + (f" on {model!r}" if model else "") +
            ", not Raspberry Pi OS on a Raspberry Pi")


def commands(ctx: ModuleContext, cfg: dict) -> list[tuple[list[str], str]]:
    """The (argv, key) pairs ``cfg`` asks for, in order."""
    out: list[tuple[list[str], str]] = []
    interfaces = cfg.get("interfaces") or {}
    for name, function in INTERFACES.items():
        if name in interfaces:
            out.append(([RASPI_CONFIG, "nonint", function, "0" if interfaces[name] else "1"], f"rpi.interfaces.{name}"))
    if "serial" in interfaces:
        serial = interfaces["serial"]
        if isinstance(serial, dict):
            console, hardware = bool(serial.get("console", False)), bool(serial.get("hardware", False))
        else:
            console, hardware = bool(serial), False
        if console and not hardware and not _is_pi_five(ctx):
            hardware = True  # one usable UART: the console needs it
        out.append(([RASPI_CONFIG, "nonint", "do_serial_cons", "0" if console else "1"], "rpi.interfaces.serial"))
        out.append(([RASPI_CONFIG, "nonint", "do_serial_hw", "0" if hardware else "1"], "rpi.interfaces.serial"))
    if "enable_usb_gadget" in cfg:
        out.append(([USB_GADGET, "on" if cfg["enable_usb_gadget"] else "off"], "rpi.enable_usb_gadget"))
    return out


def _is_pi_five(ctx: ModuleContext) -> bool:
    try:
        ctx.root.run([RASPI_CONFIG, "nonint", "is_pifive"], input=b"", timeout=60)
    except CommandError:
        return False
    return True


def handle(ctx: ModuleContext) -> None:
    from cloudseed.agent.modules._system_tools import checked

    cfg = checked(ctx, "rpi", MODULE.schema)
    why_not = is_pi_os(ctx)
    if why_not:
        ctx.warn(f"rpi not applied: not applicable here: {why_not}")
        return
    todo = commands(ctx, cfg) if ctx.root.isfile(RASPI_CONFIG) else None
    if todo is None:
        raise ModuleError("rpi: raspi-config is not installed (install the raspi-config package)")
    problems = []
    changed = False
    for argv, key in todo:
        if not ctx.root.isfile(argv[0]):
            problems.append(f"{key}: {argv[0]} is not installed (install the rpi-usb-gadget package)")
            continue
        try:
            ctx.root.run(argv, input=b"", timeout=300)
            changed = True
        except CommandError as e:
            problems.append(f"{key}: {' '.join(argv[-2:] if argv[0] == RASPI_CONFIG else argv)} failed: {e}")
    if changed:
        ctx.root.write(REBOOT_REQUIRED, "*** System restart required ***\n", mode=0o644)
        ctx.log.info("rpi: the changes take effect after a reboot (%s written)", REBOOT_REQUIRED)
    if problems:
        raise ModuleError("; ".join(problems))
