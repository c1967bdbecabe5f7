// A policy on a method the generated class cannot override.
class Inventory {
 public:
  virtual ~Inventory() = default;
  [[r4c::adaptive_limit]]
  int stock(int sku);
  [[r4c::bulkhead]]
  static int total();
  virtual int count() = 0;
};
