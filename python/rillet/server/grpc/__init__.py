"""The gRPC transport (``proto/rillet/v1``): thin servicers that decode a request
(:mod:`rillet.protocol`), call the broker's :class:`~rillet.broker.apis.BrokerApis`, the
controller or the metadata quorum, and encode the answer. No request handling lives here.

    listener.py   one grpc.aio server per listener group, with health checking and reflection
    produce.py    ProduceService (requests read in place)
    fetch.py      FetchService: Fetch (responses written in place), ListOffsets
    metadata.py   MetadataService
    admin.py      AdminService
    group.py      GroupService
    transaction.py  TransactionService (InitProducerId)
    quorum.py     QuorumService (Raft RPCs, broker registration and heartbeats,
                  DescribeQuorum) and the Raft driver's transport to the other voters
"""
