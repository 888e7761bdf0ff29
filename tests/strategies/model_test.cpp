#include "strategies/model.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>

#include "common/errors.hpp"

namespace paradyse {
namespace {

// A config file under the system's temporary folder, removed at the end of the test.
class TempConfig {
 public:
  TempConfig(const std::string& stem, const std::string& text)
      : path_(std::filesystem::temp_directory_path() /
              ("paradyse_model_test_" + std::to_string(std::random_device{}()) + "_" + stem + ".json")) {
    std::ofstream(path_) << text;
  }
  ~TempConfig() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  TempConfig(const TempConfig&) = delete;
  TempConfig& operator=(const TempConfig&) = delete;

  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// A small Llama-style config.
const std::string kLlamaConfig = R"({
  "model_type": "llama",
  "hidden_size": 512,
  "num_attention_heads": 8,
  "num_key_value_heads": 2,
  "num_hidden_layers": 4,
  "intermediate_size": 1536,
  "vocab_size": 1000,
  "hidden_act": "silu",
  "rms_norm_eps": 1e-05,
  "rope_theta": 10000.0
})";

// `text` with its `"key": value` replaced by `replacement` (itself a `"key": value`).
std::string edit(std::string text, const std::string& key, const std::string& replacement) {
  const auto start = text.find("\"" + key + "\"");
  REQUIRE(start != std::string::npos);
  const auto end = text.find_first_of(",\n", start);
  return text.replace(start, end - start, replacement);
}

// Loads `text` from a file and returns the InputError it must throw.
InputError load_error(const std::string& text) {
  TempConfig file("bad", text);
  try {
    load_model(file.path());
  } catch (const InputError& e) {
    CHECK(e.file() == file.path());
    return e;
  }
  throw std::runtime_error("expected an InputError for:\n" + text);
}

}  // namespace

TEST_CASE("model: every preset loads with its shape", "[strategies]") {
  struct Expected {
    std::string name;
    int64_t hidden, heads, kv_heads, ffn_hidden, num_layers, vocab;
    bool causal;
    MlpKind mlp;
    NormKind norm;
    bool tied;
    double hidden_dropout, attention_dropout;
  };
  const std::vector<Expected> presets = {
      {"bert-large", 1024, 16, 16, 4096, 24, 30522, false, MlpKind::gelu, NormKind::layer_norm, true, 0.1,
       0.1},
      {"llama-8l", 8192, 64, 64, 32768, 8, 32000, true, MlpKind::gelu, NormKind::layer_norm, false, 0.1, 0.1},
      {"gpt-8l", 12288, 96, 96, 49152, 8, 50257, true, MlpKind::gelu, NormKind::layer_norm, true, 0.1, 0.1},
      {"llama3-8b", 4096, 32, 8, 14336, 32, 128256, true, MlpKind::swiglu, NormKind::rms_norm, false, 0.0,
       0.0},
      {"llama3-70b-8l", 8192, 64, 8, 28672, 8, 128256, true, MlpKind::swiglu, NormKind::rms_norm, false, 0.0,
       0.0},
      {"gpt3-22b", 6144, 64, 64, 24576, 48, 51200, true, MlpKind::gelu, NormKind::layer_norm, true, 0.1, 0.1},
      {"tiny-gpt", 256, 8, 8, 1024, 2, 1000, true, MlpKind::gelu, NormKind::layer_norm, false, 0.0, 0.0},
      {"tiny-llama", 256, 8, 4, 512, 2, 1000, true, MlpKind::swiglu, NormKind::rms_norm, false, 0.0, 0.0},
  };
  REQUIRE(model_preset_names().size() == presets.size());
  for (const Expected& expected : presets) {
    INFO("preset " << expected.name);
    const ModelSpec spec = load_model(expected.name);
    CHECK(spec.name == expected.name);
    CHECK(spec.source == "preset " + expected.name);
    CHECK(spec.hidden == expected.hidden);
    CHECK(spec.heads == expected.heads);
    CHECK(spec.kv_heads == expected.kv_heads);
    CHECK(spec.ffn_hidden == expected.ffn_hidden);
    CHECK(spec.num_layers == expected.num_layers);
    CHECK(spec.vocab == expected.vocab);
    CHECK(spec.causal == expected.causal);
    CHECK(spec.mlp == expected.mlp);
    CHECK(spec.norm == expected.norm);
    CHECK(spec.tied_embeddings == expected.tied);
    CHECK(spec.hidden_dropout == Approx(expected.hidden_dropout));
    CHECK(spec.attention_dropout == Approx(expected.attention_dropout));
    CHECK(spec.attention_kernel == AttentionKernel::flash);
  }
}

TEST_CASE("model: llama3-8b has the published 8.03e9 parameters", "[strategies]") {
  const ModelSpec spec = load_model("llama3-8b");
  CHECK(spec.total_parameters() == Approx(8.03e9).epsilon(0.01));
  // (4096 + 2·1024)·4096 + 4096² + 3·14336·4096 + 2·4096 per layer; 2·128256·4096 + 4096 outside.
  CHECK(spec.layer_parameters() == 218'112'000);
  CHECK(spec.embedding_parameters() == 1'050'677'248);
}

TEST_CASE("model: bert-large is within 1% of BERT-large's 335M parameters", "[strategies]") {
  // 335,141,888 for transformers' BertModel, which also has biases, positions and a pooler.
  CHECK(load_model("bert-large").total_parameters() == Approx(335'141'888).epsilon(0.01));
}

TEST_CASE("model: GQA and SwiGLU come from the config", "[strategies]") {
  const ModelSpec llama = load_model("llama3-70b-8l");
  CHECK(llama.kv_heads < llama.heads);
  CHECK(llama.head_dim() == 128);
  CHECK(llama.kv_hidden() == 1024);
  CHECK(llama.mlp == MlpKind::swiglu);
  CHECK(llama.mlp_in_rows() == 2 * 28672);

  const ModelSpec gpt = load_model("gpt-8l");
  CHECK(gpt.kv_heads == gpt.heads);
  CHECK(gpt.kv_hidden() == gpt.hidden);
  CHECK(gpt.mlp == MlpKind::gelu);
  CHECK(gpt.mlp_in_rows() == gpt.ffn_hidden);

  SECTION("num_key_value_heads absent: MHA") {
    TempConfig file("mha", edit(kLlamaConfig, "num_key_value_heads", R"("num_key_value_heads": null)"));
    CHECK(load_model(file.path()).kv_heads == 8);
  }
  SECTION("hidden_act gelu in a config without model_type: plain GELU MLP") {
    TempConfig file("gelu", edit(edit(kLlamaConfig, "model_type", R"("model_type": null)"), "hidden_act",
                                 R"("hidden_act": "gelu_pytorch_tanh")"));
    const ModelSpec spec = load_model(file.path());
    CHECK(spec.mlp == MlpKind::gelu);
    CHECK(spec.norm == NormKind::rms_norm);  // rms_norm_eps is present
  }
}

ModelOverrides causal_override(bool causal) {
  ModelOverrides overrides;
  overrides.causal = causal;
  return overrides;
}

ModelOverrides kernel_override(AttentionKernel kernel) {
  ModelOverrides overrides;
  overrides.attention_kernel = kernel;
  return overrides;
}

TEST_CASE("model: the causal argument overrides the config", "[strategies]") {
  CHECK_FALSE(load_model("bert-large").causal);
  CHECK(load_model("bert-large", causal_override(true)).causal);
  CHECK(load_model("gpt-8l").causal);
  CHECK_FALSE(load_model("gpt-8l", causal_override(false)).causal);
  CHECK(load_model("llama3-8b", causal_override(true)).causal);
}

TEST_CASE("model: the attention kernel comes from attn_implementation, else flash, and may be overridden",
          "[strategies]") {
  CHECK(load_model("gpt-8l").attention_kernel == AttentionKernel::flash);
  CHECK(load_model("gpt-8l", kernel_override(AttentionKernel::unfused)).attention_kernel ==
        AttentionKernel::unfused);
  for (const auto& [value, kernel] : {std::pair{"eager", AttentionKernel::unfused},
                                      {"sdpa", AttentionKernel::flash},
                                      {"flash_attention_2", AttentionKernel::flash}}) {
    INFO(value);
    TempConfig file("attn_implementation",
                    std::string(R"({"model_type": "gpt2", "n_embd": 256, "n_head": 4, "n_layer": 2,
                    "vocab_size": 500, "activation_function": "gelu_new", "attn_implementation": ")") +
                        value + "\"}");
    CHECK(load_model(file.path()).attention_kernel == kernel);
    CHECK(load_model(file.path(), kernel_override(AttentionKernel::flash)).attention_kernel ==
          AttentionKernel::flash);
  }
  TempConfig bad("bad_attn_implementation", R"({"model_type": "gpt2", "n_embd": 256, "n_head": 4,
    "n_layer": 2, "vocab_size": 500, "activation_function": "gelu_new", "attn_implementation": "xformers"})");
  try {
    load_model(bad.path());
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    CHECK_THAT(e.what(), Catch::Contains("attn_implementation") && Catch::Contains("'eager'") &&
                             Catch::Contains("'xformers'"));
  }
}

TEST_CASE("model: dropout probabilities by family, with their config classes' defaults", "[strategies]") {
  TempConfig gpt2("gpt2_dropout", R"({"model_type": "gpt2", "n_embd": 256, "n_head": 4, "n_layer": 2,
    "vocab_size": 500, "activation_function": "gelu_new", "resid_pdrop": 0.2, "attn_pdrop": 0.3})");
  CHECK(load_model(gpt2.path()).hidden_dropout == Approx(0.2));
  CHECK(load_model(gpt2.path()).attention_dropout == Approx(0.3));
  TempConfig bert("bert_dropout", R"({"model_type": "bert", "hidden_size": 256, "num_attention_heads": 4,
    "num_hidden_layers": 2, "intermediate_size": 1024, "vocab_size": 500, "hidden_act": "gelu",
    "attention_probs_dropout_prob": 0.05})");
  CHECK(load_model(bert.path()).hidden_dropout == Approx(0.1));  // BertConfig's default
  CHECK(load_model(bert.path()).attention_dropout == Approx(0.05));
  TempConfig generic("generic_dropout", R"({"hidden_size": 256, "num_attention_heads": 4,
    "num_hidden_layers": 2, "intermediate_size": 1024, "vocab_size": 500, "hidden_act": "gelu",
    "hidden_dropout": 0.15, "attention_dropout": 0.25})");
  CHECK(load_model(generic.path()).hidden_dropout == Approx(0.15));
  CHECK(load_model(generic.path()).attention_dropout == Approx(0.25));
}

TEST_CASE("model: a GPT-2-style file with n_inner null has f = 4h", "[strategies]") {
  TempConfig file("tiny_gpt2", R"({
  "model_type": "gpt2", "n_embd": 256, "n_head": 4, "n_layer": 2, "n_inner": null,
  "vocab_size": 500, "activation_function": "gelu_new", "n_positions": 1024, "summary_type": "cls_index"
})");
  const ModelSpec spec = load_model(file.path());
  CHECK(spec.ffn_hidden == 1024);
  CHECK(spec.hidden == 256);
  CHECK(spec.causal);
  CHECK(spec.tied_embeddings);                // GPT2Config's default
  CHECK(spec.hidden_dropout == Approx(0.1));  // resid_pdrop's default
  CHECK(spec.source == file.path());
  CHECK(spec.name == std::filesystem::path(file.path()).stem().string());
  // No biases: 4h² attention + 2·4h² MLP + two LayerNorms (2h each); tied table + final LayerNorm.
  CHECK(spec.layer_parameters() == 12 * 256 * 256 + 4 * 256);
  CHECK(spec.embedding_parameters() == 500 * 256 + 2 * 256);
}

TEST_CASE("model: a Llama-style file loads with GQA, SwiGLU and RMSNorm", "[strategies]") {
  TempConfig file("tiny_llama", kLlamaConfig);
  const ModelSpec spec = load_model(file.path());
  CHECK(spec.hidden == 512);
  CHECK(spec.kv_heads == 2);
  CHECK(spec.mlp == MlpKind::swiglu);
  CHECK(spec.norm == NormKind::rms_norm);
  CHECK_FALSE(spec.tied_embeddings);  // LlamaConfig's default
  CHECK(spec.hidden_dropout == 0.0);
  // (512 + 2·128)·512 + 512² + 3·1536·512 + 2·512; untied: 2·1000·512 + 512.
  CHECK(spec.layer_parameters() == 768 * 512 + 512 * 512 + 3 * 1536 * 512 + 2 * 512);
  CHECK(spec.embedding_parameters() == 2 * 1000 * 512 + 512);
}

TEST_CASE("model: rotary embeddings for the Llama family or a rope_theta, at its base", "[strategies]") {
  TempConfig llama("llama", kLlamaConfig);
  CHECK(load_model(llama.path()).rotary);
  CHECK(load_model(llama.path()).rope_theta == 10000.0);
  TempConfig base("llama_base", edit(kLlamaConfig, "rope_theta", R"("rope_theta": 500000.0)"));
  CHECK(load_model(base.path()).rope_theta == 500000.0);
  TempConfig no_theta("llama_no_theta", edit(kLlamaConfig, "rope_theta", R"("unused": 0)"));
  CHECK(load_model(no_theta.path()).rotary);
  CHECK(load_model(no_theta.path()).rope_theta == 10000.0);  // LlamaConfig's default
  // A generic block with a rope_theta has them; GPT-2 and BERT add absolute positions instead.
  TempConfig generic("generic", edit(edit(kLlamaConfig, "model_type", R"("unused": 0)"), "rope_theta",
                                     R"("rope_theta": 1000000.0)"));
  CHECK(load_model(generic.path()).rotary);
  CHECK(load_model(generic.path()).rope_theta == 1000000.0);
  CHECK(load_model("llama3-8b").rope_theta == 500000.0);
  CHECK_FALSE(load_model("gpt-8l").rotary);
  CHECK_FALSE(load_model("bert-large").rotary);
  CHECK_FALSE(load_model("llama-8l").rotary);  // the paper's shape, a GPT-2-style file
}

TEST_CASE("model: an unknown preset lists the presets", "[strategies]") {
  try {
    load_model("gpt-9000");
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    const std::string message = e.what();
    CHECK_THAT(message, Catch::Contains("gpt-9000"));
    for (const std::string& name : model_preset_names()) CHECK_THAT(message, Catch::Contains(name));
  }
}

TEST_CASE("model: a nonexistent path is an InputError naming it", "[strategies]") {
  const std::string path =
      (std::filesystem::temp_directory_path() / "paradyse_no_such_dir/config.json").string();
  try {
    load_model(path);
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    CHECK(e.file() == path);
    CHECK_THAT(std::string(e.what()), Catch::Contains(path) && Catch::Contains("llama3-8b"));
  }
}

TEST_CASE("model: bad fields are InputErrors naming the field", "[strategies]") {
  struct Case {
    std::string what, text, field, says;
  };
  const std::vector<Case> cases = {
      {"missing hidden_size", edit(kLlamaConfig, "hidden_size", R"("unused": 0)"), "hidden_size", "missing"},
      {"non-integer heads", edit(kLlamaConfig, "num_attention_heads", R"("num_attention_heads": 8.5)"),
       "num_attention_heads", "positive integer"},
      {"heads as a string", edit(kLlamaConfig, "num_attention_heads", R"("num_attention_heads": "8")"),
       "num_attention_heads", "positive integer"},
      {"negative heads", edit(kLlamaConfig, "num_attention_heads", R"("num_attention_heads": -8)"),
       "num_attention_heads", "positive integer"},
      {"hidden not divisible by heads",
       edit(kLlamaConfig, "num_attention_heads", R"("num_attention_heads": 7)"), "num_attention_heads",
       "divisor of hidden_size"},
      {"heads not divisible by kv heads",
       edit(kLlamaConfig, "num_key_value_heads", R"("num_key_value_heads": 3)"), "num_key_value_heads",
       "divisor of num_attention_heads"},
      {"missing vocab_size", edit(kLlamaConfig, "vocab_size", R"("unused": 0)"), "vocab_size", "missing"},
      {"missing intermediate_size", edit(kLlamaConfig, "intermediate_size", R"("unused": 0)"),
       "intermediate_size", "missing"},
      {"unsupported activation", edit(kLlamaConfig, "hidden_act", R"("hidden_act": "relu")"), "hidden_act",
       "relu"},
      {"head_dim inconsistent", edit(kLlamaConfig, "rope_theta", R"("head_dim": 128)"), "head_dim", "64"},
      {"dropout above 1", edit(kLlamaConfig, "rope_theta", R"("hidden_dropout_prob": 1.5)"),
       "hidden_dropout_prob", "[0, 1]"},
      {"GPT-2 missing n_head", R"({"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "vocab_size": 10,
                                   "activation_function": "gelu_new"})",
       "n_head", "missing"},
      {"GPT-2 n_inner zero", R"({"n_embd": 64, "n_head": 4, "n_layer": 2, "n_inner": 0, "vocab_size": 10,
                                 "activation_function": "gelu_new"})",
       "n_inner", "positive integer"},
      {"GPT-2 resid_pdrop negative", R"({"n_embd": 64, "n_head": 4, "n_layer": 2, "vocab_size": 10,
                                         "activation_function": "gelu", "resid_pdrop": -0.1})",
       "resid_pdrop", "[0, 1]"},
      {"another family", R"({"model_type": "gptj", "n_embd": 64, "n_head": 4, "n_layer": 2, "vocab_size": 10,
                             "activation_function": "gelu_new"})",
       "model_type", "expected a family paradyse models (gpt2, bert, llama"},
      {"a key twice", edit(kLlamaConfig, "rope_theta", R"("hidden_size": 512)"), "hidden_size", "twice"},
      {"n_embd 2^33: products past int64", R"({"n_embd": 8589934592, "n_head": 4, "n_layer": 2,
                                              "vocab_size": 10, "activation_function": "gelu"})",
       "n_embd", "at most 2^24"},
      {"vocab_size 2^62", edit(kLlamaConfig, "vocab_size", R"("vocab_size": 4611686018427387904)"),
       "vocab_size", "at most 2^24"},
      {"layers of 3.4e15 parameters",
       R"({"n_embd": 16777216, "n_head": 4, "n_layer": 1, "n_inner": 1, "vocab_size": 10,
                                          "activation_function": "gelu"})",
       "n_embd", "expected a model of at most 2^50 parameters"},
      {"1.7e15 parameters in all",
       edit(edit(kLlamaConfig, "num_hidden_layers", R"("num_hidden_layers": 65536)"), "intermediate_size",
            R"("intermediate_size": 16777216)"),
       "num_hidden_layers", "expected a model of at most 2^50 parameters"},
      {"rope_theta not above 1", edit(kLlamaConfig, "rope_theta", R"("rope_theta": 0.5)"), "rope_theta",
       "a number above 1, got 0.5"},
      {"rope_theta a string", edit(kLlamaConfig, "rope_theta", R"("rope_theta": "10000")"), "rope_theta",
       "number"},
      {"odd head dimension under rotary embeddings",
       edit(edit(kLlamaConfig, "num_key_value_heads", R"("num_key_value_heads": 1)"), "hidden_size",
            R"("hidden_size": 504)"),
       "num_attention_heads", "an even head dimension"},
      {"more layers than a plan holds",
       edit(kLlamaConfig, "num_hidden_layers", R"("num_hidden_layers": 65537)"), "num_hidden_layers",
       "at most 2^16"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    const InputError e = load_error(c.text);
    CHECK(e.field() == c.field);
    CHECK_THAT(std::string(e.what()), Catch::Contains("'" + c.field + "'") && Catch::Contains(c.says));
  }
}

TEST_CASE("model: malformed JSON names the file and the line", "[strategies]") {
  const InputError e = load_error("{\n  \"hidden_size\": 512,\n  \"num_attention_heads\" 8\n}\n");
  CHECK(e.line() == 3);
  CHECK_THAT(std::string(e.what()), Catch::Contains(e.file() + ":3"));
}

}  // namespace paradyse
