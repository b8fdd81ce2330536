"""Run by Debian's python3 with the reference cloud-init importable (see tests/reference.py).

Usage: reference_userdata.py BLOB_FILE [INSTANCE_DATA_JSON]
       reference_userdata.py --batch INSTANCE_DATA_JSON BLOB_FILE...
Processes the blob with cloud-init's UserDataProcessor, walks the result with its default
handlers the way its init stage does (boothooks are written but not executed), and prints
one JSON object shaped like ``cloudseed userdata show --json``, read back from the files the
handlers wrote. ``--batch`` prints a JSON list, one object per blob, each processed in a forked
child (cloud-init imported once; part-handlers, which are imported modules, never shared).
"""

import json
import os
import sys
import tempfile

import yaml
from cloudinit import handlers, helpers, user_data
from cloudinit.handlers import boot_hook
from cloudinit.handlers.boot_hook import BootHookPartHandler
from cloudinit.handlers.cloud_config import CloudConfigPartHandler
from cloudinit.handlers.jinja_template import JinjaTemplatePartHandler
from cloudinit.handlers.shell_script import ShellScriptPartHandler
from cloudinit.handlers.shell_script_by_frequency import ShellScriptByFreqPartHandler
from cloudinit.settings import PER_ALWAYS, PER_INSTANCE, PER_ONCE


class FakeDatasource:
    def get_instance_id(self):
        return "iid-reference"


class NoRun:
    """Boothooks are written, never executed, in these tests."""

    class ProcessExecutionError(Exception):
        pass

    @staticmethod
    def subp(*args, **kwargs):
        return ("", "")


def read_dir(path):
    if not os.path.isdir(path):
        return []
    out = []
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        if os.path.isfile(full):
            with open(full, "rb") as f:
                out.append({"name": name, "content": f.read().decode("utf-8", "replace")})
    return out


def main(blob_path, instance_data_path):
    with open(blob_path, "rb") as f:
        blob = f.read()
    tmp = tempfile.mkdtemp()
    paths = helpers.Paths({"cloud_dir": os.path.join(tmp, "cloud"), "run_dir": os.path.join(tmp, "run")},
                          ds=FakeDatasource())
    if instance_data_path:
        os.makedirs(paths.run_dir, exist_ok=True)
        with open(instance_data_path) as src, open(paths.get_runpath("instance_data_sensitive"), "w") as dst:
            dst.write(src.read())
    boot_hook.subp = NoRun
    message = user_data.UserDataProcessor(paths).process(blob)
    opts = {"paths": paths, "datasource": FakeDatasource()}
    cloud_config = CloudConfigPartHandler(**opts)
    shell = ShellScriptPartHandler(**opts)
    default = [cloud_config, shell, ShellScriptByFreqPartHandler(PER_ALWAYS, **opts),
               ShellScriptByFreqPartHandler(PER_INSTANCE, **opts),
               ShellScriptByFreqPartHandler(PER_ONCE, **opts), BootHookPartHandler(**opts),
               JinjaTemplatePartHandler(**opts, sub_handlers=[cloud_config, shell])]
    registry = helpers.ContentHandlers()
    for mod in default:
        registry.register(mod, overwrite=False)
    handler_dir = paths.get_ipath("handlers")
    os.makedirs(handler_dir, exist_ok=True)
    sys.path.insert(0, handler_dir)  # cloud-init's own step (in the reference's Python): part-handlers load from there
    for _, mod in registry.items():
        if mod not in registry.initialized:
            handlers.call_begin(mod, None, PER_INSTANCE)
            registry.initialized.append(mod)
    data = {"handlers": registry, "handlerdir": handler_dir, "data": None, "frequency": PER_INSTANCE,
            "handlercount": 0, "excluded": []}
    handlers.walk(message, handlers.walker_callback, data=data)
    for _, mod in registry.items():
        if mod in registry.initialized:
            registry.initialized.remove(mod)
            handlers.call_end(mod, None, PER_INSTANCE)

    with open(paths.get_ipath("cloud_config"), "rb") as f:
        text = f.read().decode()
    config = yaml.safe_load(text) if text.strip() else None
    scripts_dir = paths.get_ipath_cur("scripts")
    result = {
        "cloud_config": config,
        "scripts": read_dir(scripts_dir),
        "boothooks": read_dir(paths.get_ipath("boothooks")),
        "scripts_per_freq": {freq: read_dir(os.path.join(paths.get_cpath("scripts"), freq))
                             for freq in ("per-boot", "per-instance", "per-once")},
        "handlers": [h for h in read_dir(handler_dir) if h["name"].endswith(".py")],
    }
    return result


def in_child(blob_path, instance_data_path):
    """``main`` in a forked child: its result as JSON text, or an error object."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            text = json.dumps(main(blob_path, instance_data_path), default=str)
        except BaseException as e:  # the child reports everything, then exits
            text = json.dumps({"error": f"{type(e).__name__}: {e}"})
        with os.fdopen(write, "w") as pipe:
            pipe.write(text)
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    os.waitpid(pid, 0)
    return json.loads(text)


if sys.argv[1] == "--batch":
    print(json.dumps([in_child(path, sys.argv[2]) for path in sys.argv[3:]], default=str))
else:
    json.dump(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None), sys.stdout, default=str)
