"""The registry's batch reads (``find_by_addresses``, ``get_many``, ``timelines``), on SQLite and a
real PostgreSQL: what the metadata server reads for a storm of new instances in three statements
per batch must be exactly what the one-instance reads (``find_by_address``, ``get``,
``timeline``) give for each: nobody, one or several instances at an address, records, events in
order and the weight of deleted ones; more timelines than one statement takes are read in several."""

from __future__ import annotations

from cloudseed.provider.registry import InstanceRecord, open_registry
from cloudseed.provider.registry.events import MAX_TIMELINES

T0 = 1_900_000_000.0


def _records() -> list[InstanceRecord]:
    records = [InstanceRecord(instance_id=f"i-batch-{n:03d}", hostname=f"batch-{n}", user_data=f"#{n}\n".encode(),
                              addresses=[{"address": f"10.77.{n // 250}.{n % 250 + 1}", "network": "blue"}])
               for n in range(MAX_TIMELINES + 20)]
    # one address on two networks (ambiguous without a network), one instance with two addresses
    records.append(InstanceRecord(instance_id="i-batch-red", hostname="red",
                                  addresses=[{"address": "10.77.0.1", "network": "red"},
                                             {"address": "10.78.0.9", "network": "red"}]))
    return records


def test_batch_reads_give_what_the_one_instance_reads_give(db_url):
    with open_registry(db_url) as registry:
        registry.add_many(_records())
        registry.add_event("i-batch-003", "reboot", T0 + 60, event_id="late")
        registry.add_event("i-batch-003", "maintenance", T0, T0 + 600, {"code": "instance-stop"}, "early")
        registry.add_event("i-batch-007", "reboot", T0, event_id="gone")
        registry.update_event("i-batch-007", "gone", not_before=T0 + 5)
        registry.delete_event("i-batch-007", "gone")  # its weight stays in the timeline's ``retired``
        registry.add_event("i-batch-007", "reboot", T0 + 9, event_id="kept")

        addresses = ["10.77.0.1", "10.77.0.2", "10.78.0.9", "10.99.0.1", "10.77.1.20"]
        for network in (None, "blue", "red", "green"):
            found = registry.find_by_addresses(addresses, network)
            for address in addresses:
                assert sorted(found.get(address, [])) == sorted(registry.find_by_address(address, network)), \
                    (address, network)
        assert sorted(registry.find_by_addresses(["10.77.0.1"])["10.77.0.1"]) == ["i-batch-000", "i-batch-red"]
        assert registry.find_by_addresses([]) == {}

        ids = [f"i-batch-{n:03d}" for n in range(0, MAX_TIMELINES + 20, 3)] + ["i-batch-red", "i-nobody"]
        records = registry.get_many(ids)
        assert sorted(records) == sorted(i for i in ids if i != "i-nobody")
        for instance_id, record in records.items():
            assert record == registry.get(instance_id)

        every = [f"i-batch-{n:03d}" for n in range(MAX_TIMELINES + 20)] + ["i-nobody"]
        timelines = registry.timelines(every)  # more than one statement takes: read in two
        assert sorted(timelines) == sorted(every)
        for instance_id in every:
            events, retired = timelines[instance_id]
            assert (events, retired) == registry.timeline(instance_id), instance_id
        assert [e.event_id for e in timelines["i-batch-003"][0]] == ["early", "late"]
        assert timelines["i-batch-007"][1] > 0 and [e.event_id for e in timelines["i-batch-007"][0]] == ["kept"]
        assert timelines["i-batch-001"] == ([], 0)
        assert registry.timelines([]) == {}
