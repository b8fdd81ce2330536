"""locale: set the system locale (``LANG``), generating it first where the distro needs that.

Debian/Ubuntu: the locale is enabled in ``/etc/locale.gen``, generated, and written to
``/etc/default/locale``; RHEL family: ``/etc/locale.conf``. ``locale_configfile`` names another
file. Only runs when ``locale`` is configured (an image's existing locale is left alone).
"""

from __future__ import annotations

import re

from cloudseed.agent.distros import DistroError
from cloudseed.agent.modules import STAGE_CONFIG, ModuleContext, ModuleError, ModuleSpec

_LOCALE = re.compile(r"^[A-Za-z]{1,8}(_[A-Za-z0-9]{2,3})?(\.[A-Za-z0-9-]+)?(@[A-Za-z0-9]+)?$")

MODULE = ModuleSpec(
    name="locale", stage=STAGE_CONFIG, activate_by=("locale",),
    title="Set the system locale",
    schema={"properties": {
        "locale": {"oneOf": [{"type": "string"}, {"type": "boolean", "enum": [False]}]},
        "locale_configfile": {"type": "string"},
    }},
    examples=(
        """\
#cloud-config
locale: en_GB.UTF-8
""",
        """\
#cloud-config
# Generate the locale and write it to a file of your choice.
locale: de_DE.UTF-8
locale_configfile: /etc/default/locale
""",
        """\
#cloud-config
# Leave the system locale as the image has it.
locale: false
""",
    ),
)


def handle(ctx: ModuleContext) -> None:
    value = ctx.cfg.get("locale")
    if value is False or (isinstance(value, str) and value.strip().lower() == "false"):
        return
    if not isinstance(value, str) or not _LOCALE.match(value.strip()):
        raise ModuleError(f"locale: {value!r} is not a locale name such as 'en_US.UTF-8'")
    config_file = ctx.cfg.get("locale_configfile")
    if config_file is not None and (not isinstance(config_file, str) or not config_file.startswith("/")):
        raise ModuleError("locale_configfile: expected an absolute path")
    try:
        ctx.distro.set_locale(value.strip(), config_file)
    except DistroError as e:
        raise ModuleError(f"locale: {e}") from None
    ctx.log.info("locale set to %s", value.strip())
