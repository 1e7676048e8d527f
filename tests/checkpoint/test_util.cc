#include "tests/checkpoint/test_util.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "checkpoint/crc.h"
#include "checkpoint/format.h"
#include "engine/fp_bits.h"
#include "engine/master_codec.h"
#include "tandem/error.h"

namespace tandem::testing {
namespace {

template <typename V>
void Fill(V* v, size_t n, std::mt19937_64* rng) {
  v->resize(n);
  auto* p = reinterpret_cast<unsigned char*>(v->data());
  for (size_t i = 0; i < n * sizeof(typename V::value_type); ++i) p[i] = (*rng)() & 0xFF;
}

// Random bit patterns made valid with as few bit changes as possible: a non-finite value
// loses its top exponent bit, a value that must not be negative its sign bit.
void MakeFinite(std::vector<float>* v, bool non_negative) {
  for (float& x : *v) {
    uint32_t b = num::BitsOf(x);
    if (!std::isfinite(x)) b &= ~0x40000000u;
    if (non_negative) b &= 0x7FFFFFFFu;
    x = num::FloatOf(b);
  }
}
void MakeFiniteBf16(std::vector<uint16_t>* v, bool non_negative) {
  for (uint16_t& x : *v) {
    if ((x & 0x7F80u) == 0x7F80u) x &= 0xBFFFu;
    if (non_negative) x &= 0x7FFFu;
  }
}

class FaultWritableFile : public WritableFile {
 public:
  FaultWritableFile(FaultEnv* env, std::shared_ptr<FaultEnv::File> f) : env_(env), f_(f) {}
  void Append(const void* data, size_t n) override {
    try {
      env_->Step("Append");
    } catch (...) {
      f_->data.append(static_cast<const char*>(data), n / 2);  // a short write, then failure
      throw;
    }
    f_->data.append(static_cast<const char*>(data), n);
  }
  void Flush() override { env_->Step("Flush"); }
  void Sync() override {
    env_->Step("Sync");
    f_->synced = f_->data.size();
  }
  void Close() override { env_->Step("Close"); }

 private:
  FaultEnv* env_;
  std::shared_ptr<FaultEnv::File> f_;
};

class StringFile : public RandomAccessFile {
 public:
  explicit StringFile(std::string d) : d_(std::move(d)) {}
  size_t Read(uint64_t off, size_t n, void* out) const override {
    if (off >= d_.size()) return 0;
    const size_t k = std::min<size_t>(n, d_.size() - off);
    d_.copy(static_cast<char*>(out), k, off);
    return k;
  }
  uint64_t Size() const override { return d_.size(); }

 private:
  std::string d_;
};

}  // namespace

OptimizerSnapshot MakeSnapshot(Algorithm algo, StateFormats default_formats, uint32_t seed,
                               const std::vector<uint64_t>& sizes,
                               const std::map<size_t, StateFormats>& overrides) {
  const StateFormats& f0 = default_formats;
  std::mt19937_64 rng(seed);
  OptimizerSnapshot s;
  s.algo = algo;
  s.formats = f0;
  HyperParams g0, g1;
  g0.momentum = 0.9;
  g0.weight_decay = 0.1;
  g1.lr_scale = 0.5;
  g1.beta1 = 0.8;
  s.groups = {g0, g1};
  s.step = static_cast<int64_t>(seed) * 7 + 3;
  s.metadata = std::string(R"([{"lr": 0.001, "name": "\u00e9mbed )") + "\xe2\x9c\x93\", \"seed\": " +
               std::to_string(seed) + "}]";
  for (size_t i = 0; i < sizes.size(); ++i) {
    TensorSnapshot t;
    t.name = "layer." + std::to_string(i) + ".weight";
    t.numel = sizes[i];
    t.group = static_cast<uint32_t>(i % 2);
    const auto over = overrides.find(i);
    t.formats = over != overrides.end() ? over->second : f0;
    const StateFormats& f = t.formats;
    t.param_dtype = i % 3 == 0 ? DType::kBF16 : DType::kF32;
    t.grad_dtype = i % 3 == 1 ? DType::kF16 : DType::kBF16;
    const size_t n = t.numel, groups = (n + kQuantGroup - 1) / kQuantGroup;
    const bool bf = f.master != MasterFormat::kF32;
    Fill(&t.master_f32, bf ? 0 : n, &rng);
    Fill(&t.master_bf16, bf ? n : 0, &rng);
    Fill(&t.ecc8, f.master == MasterFormat::kBF16Ecc8 ? n : 0, &rng);
    Fill(&t.ecc16, f.master == MasterFormat::kBF16Ecc16 ? n : 0, &rng);
    const bool hm = HasMomentum(algo, s.groups[t.group]), hv = HasVariance(algo);
    const bool mq = f.momentum == MomentFormat::kQ8, vq = f.variance == MomentFormat::kQ8;
    Fill(&t.m_f32, hm && !mq ? n : 0, &rng);
    Fill(&t.m_codes, hm && mq ? n : 0, &rng);
    Fill(&t.m_scales, hm && mq ? groups : 0, &rng);
    Fill(&t.v_f32, hv && !vq ? n : 0, &rng);
    Fill(&t.v_codes, hv && vq ? n : 0, &rng);
    Fill(&t.v_scales, hv && vq ? groups : 0, &rng);
    MakeFinite(&t.master_f32, false);
    MakeFinite(&t.m_f32, false);
    MakeFinite(&t.v_f32, true);
    MakeFiniteBf16(&t.master_bf16, false);
    MakeFiniteBf16(&t.m_scales, true);
    MakeFiniteBf16(&t.v_scales, true);
    // A restorable variance (ValidateRestorable): code 255 decodes to the scale itself,
    // whose square must stay finite, so scales stay below 2^64 (bits 0x5F80).
    for (uint16_t& x : t.v_scales) x %= 0x5F80u;
    // A restorable first moment: Adam divides it by sqrt(v) + eps, so it stays below 2^64
    // (|m| / eps then stays far below the fp32 range).
    for (uint16_t& x : t.m_scales) x %= 0x5F80u;
    for (float& x : t.m_f32)
      if (std::fabs(x) > 0x1p64f) x = std::ldexp(x, -64);
    for (size_t k = 0; k < t.ecc8.size(); ++k)  // +-0 with a negative correction is NaN
      if (!std::isfinite(num::DecodeEcc8(t.master_bf16[k], t.ecc8[k]))) t.ecc8[k] = 0;
    for (size_t k = 0; k < t.ecc16.size(); ++k)
      if (!std::isfinite(num::DecodeEcc16(t.master_bf16[k], t.ecc16[k]))) t.ecc16[k] = 0;
    t.step = s.step - static_cast<int64_t>(i);
    if (t.step < 0) t.step = 0;
    if (n == 0) t.shape = {0, 7};
    else if (n % 8 == 0) t.shape = {n / 8, 2, 4};
    else if (i % 2 == 1) t.shape = {1, n};
    s.tensors.push_back(std::move(t));
  }
  ValidateRestorable(s);
  return s;
}

OptimizerSnapshot MakeCompressibleSnapshot(uint32_t seed) {
  StateFormats f{MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8};
  OptimizerSnapshot s = MakeSnapshot(Algorithm::kAdamW, f, seed, {5000, 70, 4096});
  std::mt19937 rng(seed);
  for (TensorSnapshot& t : s.tensors) {
    for (auto& x : t.master_bf16) x = static_cast<uint16_t>(0x3C00 + rng() % 4);
    for (auto& x : t.ecc8) x = static_cast<int8_t>(rng() % 3);
    for (auto& x : t.m_codes) x = static_cast<uint8_t>(rng() % 2);
    for (auto& x : t.v_codes) x = 0;
    for (auto& x : t.m_scales) x = 0x3F80;
    for (auto& x : t.v_scales) x = 0x3F80;
  }
  return s;
}

namespace {
template <typename V>
bool Same(const V& a, const V& b) {
  return a.size() == b.size() &&
         (a.empty() || memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0);
}
}  // namespace

bool SameBits(const OptimizerSnapshot& a, const OptimizerSnapshot& b) {
  if (a.algo != b.algo || !(a.formats == b.formats) || a.groups != b.groups || a.step != b.step ||
      a.metadata != b.metadata || a.tensors.size() != b.tensors.size())
    return false;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const TensorSnapshot& x = a.tensors[i];
    const TensorSnapshot& y = b.tensors[i];
    if (x.name != y.name || x.numel != y.numel || x.shape != y.shape || x.step != y.step ||
        !(x.formats == y.formats) ||
        x.param_dtype != y.param_dtype ||
        x.grad_dtype != y.grad_dtype || x.group != y.group || !Same(x.master_f32, y.master_f32) ||
        !Same(x.master_bf16, y.master_bf16) || !Same(x.ecc8, y.ecc8) || !Same(x.ecc16, y.ecc16) ||
        !Same(x.m_f32, y.m_f32) || !Same(x.v_f32, y.v_f32) || !Same(x.m_codes, y.m_codes) ||
        !Same(x.v_codes, y.v_codes) || !Same(x.m_scales, y.m_scales) || !Same(x.v_scales, y.v_scales))
      return false;
  }
  return true;
}

std::vector<std::pair<Algorithm, StateFormats>> AllCombinations() {
  std::vector<std::pair<Algorithm, StateFormats>> out;
  for (Algorithm a : {Algorithm::kAdamW, Algorithm::kAdam, Algorithm::kLion, Algorithm::kSGD})
    for (MasterFormat m : {MasterFormat::kF32, MasterFormat::kBF16, MasterFormat::kBF16Ecc8,
                           MasterFormat::kBF16Ecc16})
      for (MomentFormat mo : {MomentFormat::kF32, MomentFormat::kQ8})
        for (MomentFormat v : {MomentFormat::kF32, MomentFormat::kQ8})
          out.push_back({a, StateFormats{m, mo, v}});
  return out;
}

std::string WithManifest(const std::string& file,
                         const std::function<void(nlohmann::json&)>& edit) {
  const size_t kF = ckpt::kFooterSize;
  uint64_t off;
  memcpy(&off, file.data() + file.size() - kF, 8);
  nlohmann::json j = nlohmann::json::parse(file.substr(off, file.size() - kF - off));
  edit(j);
  const std::string text = j.dump();
  std::string out = file.substr(0, off) + text;
  unsigned char f[ckpt::kFooterSize];
  memcpy(f, file.data() + file.size() - kF, kF);
  const uint64_t len = text.size(), file_len = out.size() + kF;
  const uint32_t crc = ckpt::SectionCrc(ckpt::SectionKind::kManifest, ckpt::kNoTensor,
                                        ckpt::Codec::kNone, len, text.data(), len);
  memcpy(f + 8, &len, 8);
  memcpy(f + 16, &crc, 4);
  memcpy(f + 24, &file_len, 8);
  const uint32_t fcrc = ckpt::Crc32c(f, 44);
  memcpy(f + 44, &fcrc, 4);
  return out + std::string(reinterpret_cast<char*>(f), kF);
}

std::string WithSectionByte(const std::string& file, size_t section, uint64_t byte,
                            uint8_t value) {
  std::string out = file;
  // WithManifest reads the data part of `out` after edit() ran, so the changed byte and the
  // CRC computed over it land in the same file.
  return WithManifest(out, [&](nlohmann::json& j) {
    nlohmann::json& s = j["sections"][section];
    const uint64_t off = s["offset"].get<uint64_t>(), len = s["length"].get<uint64_t>();
    out[off + byte] = static_cast<char>(value);
    s["crc32c"] = ckpt::SectionCrc(static_cast<ckpt::SectionKind>(s["kind"].get<uint32_t>()),
                                   s["tensor"].get<uint32_t>(), ckpt::Codec::kNone, len,
                                   out.data() + off, len);
  });
}

namespace {
std::string GoodSmallFile() {
  auto env = NewMemEnv();
  SaveCheckpoint(MakeSnapshot(Algorithm::kAdamW, {}, 7, {1, 33, 40}), "f", {}, env.get());
  return ReadAll(env.get(), "f");
}
}  // namespace

std::string DuplicateNameFile() {
  return WithManifest(GoodSmallFile(), [](nlohmann::json& j) {
    j["tensors"][1]["name"] = j["tensors"][0]["name"];
  });
}

std::string StepOverflowFile() {
  return WithManifest(GoodSmallFile(), [](nlohmann::json& j) {
    j["step"] = std::numeric_limits<int64_t>::max();
  });
}

std::string NaNMasterFile() {
  const std::string good = GoodSmallFile();
  size_t section = 0;
  (void)WithManifest(good, [&](nlohmann::json& j) {  // find tensor 1's master_f32
    for (size_t i = 0; i < j["sections"].size(); ++i)
      if (j["sections"][i]["tensor"] == 1 && j["sections"][i]["kind"] == 1) section = i;
  });
  // Element 5 becomes 0x7FC00000 (little-endian: bytes 2 and 3 are 0xC0 0x7F).
  const std::string f = WithSectionByte(good, section, 5 * 4 + 2, 0xC0);
  return WithSectionByte(f, section, 5 * 4 + 3, 0x7F);
}

std::string ReadAll(Env* env, const std::string& path) {
  auto f = env->NewRandomAccessFile(path);
  std::string s(f->Size(), '\0');
  f->Read(0, s.size(), s.data());
  return s;
}

void WriteAll(Env* env, const std::string& path, const std::string& bytes) {
  auto f = env->NewWritableFile(path);
  f->Append(bytes.data(), bytes.size());
  f->Close();
}

void FaultEnv::Step(const std::string& what) {
  if (steps++ == fail_at) {
    failed_step = what;
    throw Error(ErrorKind::kIO, "injected failure at step " + std::to_string(fail_at) + " (" +
                                    what + ")");
  }
}

std::unique_ptr<WritableFile> FaultEnv::NewWritableFile(const std::string& path) {
  Step("NewWritableFile");
  auto f = std::make_shared<File>();
  live_[path] = f;
  return std::make_unique<FaultWritableFile>(this, f);
}

std::unique_ptr<RandomAccessFile> FaultEnv::NewRandomAccessFile(const std::string& path) {
  auto it = live_.find(path);
  if (it == live_.end()) throw Error(ErrorKind::kIO, "no file '" + path + "'");
  return std::make_unique<StringFile>(it->second->data);
}

void FaultEnv::RenameFile(const std::string& from, const std::string& to) {
  Step("RenameFile");
  auto it = live_.find(from);
  if (it == live_.end()) throw Error(ErrorKind::kIO, "no file '" + from + "'");
  auto f = it->second;
  live_.erase(it);
  live_[to] = f;
}

void FaultEnv::RemoveFile(const std::string& path) { live_.erase(path); }

void FaultEnv::SyncDir(const std::string&) {
  Step("SyncDir");
  durable_ = live_;
}

bool FaultEnv::FileExists(const std::string& path) { return live_.count(path) != 0; }

void FaultEnv::Crash() {
  for (auto& [name, f] : durable_) f->data.resize(f->synced);
  live_ = durable_;
}

}  // namespace tandem::testing
