package dev.once.internal;

import java.net.URLDecoder;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;

/**
 * Stores a flat string map in one text column, portable across dialects, as
 * {@code application/x-www-form-urlencoded} ({@code k=v&k2=v2}), sorted by key. Not API.
 */
public final class HeaderCodec {

    private HeaderCodec() {}

    public static String encode(Map<String, String> headers) {
        StringBuilder sb = new StringBuilder();
        for (Map.Entry<String, String> e : new TreeMap<>(headers).entrySet()) {
            if (sb.length() > 0) {
                sb.append('&');
            }
            sb.append(URLEncoder.encode(e.getKey(), StandardCharsets.UTF_8))
                    .append('=')
                    .append(URLEncoder.encode(e.getValue(), StandardCharsets.UTF_8));
        }
        return sb.toString();
    }

    public static Map<String, String> decode(String encoded) {
        Map<String, String> headers = new LinkedHashMap<>();
        if (encoded == null || encoded.isEmpty()) {
            return headers;
        }
        for (String pair : encoded.split("&")) {
            int eq = pair.indexOf('=');
            headers.put(
                    URLDecoder.decode(pair.substring(0, eq), StandardCharsets.UTF_8),
                    URLDecoder.decode(pair.substring(eq + 1), StandardCharsets.UTF_8));
        }
        return headers;
    }
}
