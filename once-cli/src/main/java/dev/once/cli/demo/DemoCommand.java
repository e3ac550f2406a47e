package dev.once.cli.demo;

import picocli.CommandLine.Command;

import java.util.concurrent.Callable;

@Command(name = "demo", mixinStandardHelpOptions = true, description = "placeholder")
public final class DemoCommand implements Callable<Integer> {
    @Override
    public Integer call() {
        return 0;
    }
}
