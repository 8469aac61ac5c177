package dev.delayq;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.Base64;
import java.util.Collection;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

/**
 * The SSLContext of a client: the CAs of a PEM file to trust (else the JDK's), and a PEM client
 * certificate with its PKCS#8 key ("BEGIN PRIVATE KEY", as `openssl req -nodes` writes it). The
 * JDK reads PEM certificates but not PEM keys, and keeps both in a KeyStore: made here in memory.
 */
final class Tls {
  private Tls() {}

  private static final Pattern KEY = Pattern.compile(
      "-----BEGIN PRIVATE KEY-----([A-Za-z0-9+/=\\s]+)-----END PRIVATE KEY-----");

  static SSLContext context(Path caFile, Path certFile, Path keyFile) {
    try {
      TrustManagerFactory trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
      if (caFile != null) {
        KeyStore cas = KeyStore.getInstance(KeyStore.getDefaultType());
        cas.load(null, null);
        int n = 0;
        for (Certificate c : certificates(caFile, "the CA file")) cas.setCertificateEntry("ca" + n++, c);
        trust.init(cas);
      } else {
        trust.init((KeyStore) null);
      }
      KeyManagerFactory keys = null;
      if (certFile != null) {
        KeyStore mine = KeyStore.getInstance(KeyStore.getDefaultType());
        mine.load(null, null);
        Collection<? extends Certificate> chain = certificates(certFile, "the client certificate");
        mine.setKeyEntry("client", privateKey(keyFile != null ? keyFile : certFile), new char[0], chain.toArray(new Certificate[0]));
        keys = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        keys.init(mine, new char[0]);
      }
      SSLContext ctx = SSLContext.getInstance("TLS");
      ctx.init(keys == null ? null : keys.getKeyManagers(), trust.getTrustManagers(), null);
      return ctx;
    } catch (GeneralSecurityException | IOException e) {
      throw new DelayqException.InvalidArgument("cannot set up TLS: " + e.getMessage());
    }
  }

  private static Collection<? extends Certificate> certificates(Path file, String what) {
    try {
      byte[] pem = Files.readAllBytes(file);
      Collection<? extends Certificate> certs = CertificateFactory.getInstance("X.509").generateCertificates(new ByteArrayInputStream(pem));
      if (certs.isEmpty()) throw new DelayqException.InvalidArgument(what + " " + file + " holds no PEM certificate");
      return certs;
    } catch (IOException | GeneralSecurityException e) {
      throw new DelayqException.InvalidArgument("cannot use " + what + " " + file + ": " + e.getMessage() + " (a PEM certificate is needed)");
    }
  }

  private static PrivateKey privateKey(Path file) {
    String text;
    try {
      text = Files.readString(file);
    } catch (IOException e) {
      throw new DelayqException.InvalidArgument("cannot read the client key " + file + ": " + e.getMessage());
    }
    Matcher m = KEY.matcher(text);
    if (!m.find()) {
      throw new DelayqException.InvalidArgument("the client key " + file + " holds no unencrypted PKCS#8 key (\"BEGIN PRIVATE KEY\"; "
          + "convert one with: openssl pkcs8 -topk8 -nocrypt -in KEY -out KEY.pk8)");
    }
    byte[] der = Base64.getMimeDecoder().decode(m.group(1));
    for (String algorithm : new String[] {"RSA", "EC", "Ed25519"}) {
      try {
        return KeyFactory.getInstance(algorithm).generatePrivate(new PKCS8EncodedKeySpec(der));
      } catch (GeneralSecurityException tryNext) {
        // the next algorithm
      }
    }
    throw new DelayqException.InvalidArgument("the client key " + file + " is not an RSA, EC or Ed25519 key");
  }
}
