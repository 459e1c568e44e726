// A shared library that is not a Sluice plugin (no SLUICE_PLUGIN), for plugin_test.
extern "C" __attribute__((visibility("default"))) int sluice_not_a_plugin_answer() { return 42; }
