package dev.once;

/**
 * A builder or setting was given a value that cannot work. The message names the setting, the
 * value and what is expected; fix the configuration, retrying will not help.
 */
public class InvalidConfigurationException extends OnceException {

    public InvalidConfigurationException(String message) {
        super(message);
    }
}
