// An unknown key or attribute: the message names the closest valid one.
class Orders {
 public:
  virtual ~Orders() = default;
  [[r4c::adaptive_limit(initial_limt = 10)]]
  virtual int place() = 0;
  [[r4c::adaptive_limt]]
  virtual int cancel() = 0;
  [[r4c::retry(max_atempts = 3)]]
  virtual int status() = 0;
};
