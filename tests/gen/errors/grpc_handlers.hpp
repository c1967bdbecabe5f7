// gRPC handlers under what r4c-gen does not guard them with. r4c-gen knows a handler by the
// names of gRPC's types, so stand-ins of them do here.
namespace grpc {
class Status {};
class ServerContext {};
class CallbackServerContext {};
class ServerUnaryReactor {};
template <class Request>
class ServerReadReactor {};
}  // namespace grpc
struct Request {};
struct Reply {};

class Orders {
 public:
  virtual ~Orders() = default;
  [[r4c::adaptive_limit]] [[r4c::timeout("1s")]]
  virtual grpc::Status Place(grpc::ServerContext* context, const Request* request, Reply* reply);
  [[r4c::adaptive_limit]]
  virtual grpc::ServerReadReactor<Request>* Upload(grpc::CallbackServerContext* context,
                                                   Reply* reply);
  [[r4c::bypass]] [[r4c::adaptive_limit]]
  virtual grpc::Status Check(grpc::ServerContext* context, const Request* request, Reply* reply);
  [[r4c::bypass(true)]]
  virtual grpc::Status Other(grpc::ServerContext* context, const Request* request, Reply* reply);
};
