// A header that is not valid C++: clang's own errors, then r4c-gen's.
class Broken {
 public:
  virtual ~Broken() = default;
  [[r4c::adaptive_limit]]
  virtual Missing get() = 0;
};
