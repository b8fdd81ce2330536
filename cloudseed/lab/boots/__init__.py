"""Running the lab: ``session`` (one boot from start to result), ``tries`` (one try on a restored
snapshot), ``repeat`` (--repeat, --watch), ``parallel`` (--parallel), ``compare`` (--compare:
cloudseed and Debian's cloud-init on the same data), ``delivery`` (how the instance data reaches
the guest) with ``metadata`` (a metadata server for one VM)."""
