// Values of the wrong type, positional arguments, keys and policies given twice.
class Shop {
 public:
  virtual ~Shop() = default;
  [[r4c::adaptive_limit(max_limit = "ten", algorithm = fastest)]]
  virtual int a() = 0;
  [[r4c::bulkhead(4)]]
  virtual int b() = 0;
  [[r4c::timeout(2)]]
  virtual int c() = 0;
  [[r4c::adaptive_limit(max_limit = 10, max_limit = 20)]]
  virtual int d() = 0;
  [[r4c::bulkhead]] [[r4c::bulkhead(max_concurrent = 2)]]
  virtual int e() = 0;
  [[r4c::retry(retry_on = 42)]]
  virtual int f() = 0;
  [[r4c::adaptive_limit(call_class = urgent)]]
  virtual int g() = 0;
};
