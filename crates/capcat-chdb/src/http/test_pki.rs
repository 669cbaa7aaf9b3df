//! [`TestPki`]: a certificate authority made at run time, and server
//! certificates it signs, for TLS tests against the front (feature
//! `test-certificates`).

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};

use super::FrontTls;

/// A fresh CA. Its certificate goes to the client (`ca_file`); the
/// certificates it signs go to the front.
#[derive(Debug)]
pub struct TestPki {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl TestPki {
    /// A new CA with a new key.
    ///
    /// # Panics
    /// When rcgen cannot make a key or a certificate (it can only fail on
    /// parameters this function does not take).
    #[must_use]
    pub fn new() -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new())
            .expect("no subject alternative names to parse");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "capcat test CA");
        let key = KeyPair::generate().expect("ring generates an ECDSA key");
        let issuer = CertifiedIssuer::self_signed(params, key).expect("a self-signed CA");
        Self { issuer }
    }

    /// The CA's certificate, PEM: what a client trusts.
    #[must_use]
    pub fn ca_pem(&self) -> String {
        self.issuer.pem()
    }

    /// A server certificate and key for `names` (DNS names or IP
    /// addresses), signed by this CA.
    ///
    /// # Panics
    /// When a name is neither a DNS name nor an IP address.
    #[must_use]
    pub fn server(&self, names: &[&str]) -> FrontTls {
        let names: Vec<String> = names.iter().map(|&name| name.to_owned()).collect();
        let params = CertificateParams::new(names).expect("valid DNS names or IP addresses");
        let key = KeyPair::generate().expect("ring generates an ECDSA key");
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("the CA signs the leaf");
        FrontTls {
            cert_chain_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}

impl Default for TestPki {
    fn default() -> Self {
        Self::new()
    }
}
