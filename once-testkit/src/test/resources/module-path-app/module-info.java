module app {
    requires dev.once.testkit;
}
