"""The rillet.v1 protobuf package: messages (x_pb2) and gRPC services (x_pb2_grpc)."""
