// R4C-ATR-001: durations are strings in the config file's syntax.
class Search {
 public:
  virtual ~Search() = default;
  [[r4c::timeout("2 s")]]
  virtual int find(int key) = 0;
  [[r4c::adaptive_limit(window = "5d")]]
  virtual int count() = 0;
};
