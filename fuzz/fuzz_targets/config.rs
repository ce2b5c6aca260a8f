//! `looptime serve --config FILE`: the TOML parser and every range check.
//! What must hold: no panic; a refusal names the file or the key; a config
//! it accepts validates, and its TOML form (what the manifest records and
//! hashes) reads back to the same TOML.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use looptime_cli::config::Config;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Config::from_toml(text, Path::new("fuzz.toml")) {
        Ok(cfg) => {
            cfg.validate().expect("an accepted config validates");
            let toml = cfg.to_toml().expect("an accepted config has a TOML form");
            let back =
                Config::from_toml(&toml, Path::new("again.toml")).expect("its TOML reads back");
            assert_eq!(
                back.to_toml().unwrap(),
                toml,
                "the TOML survives its round trip"
            );
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(
                msg.contains("fuzz.toml") || msg.contains("config key"),
                "a refusal says where: {msg}"
            );
        }
    }
});
