#pragma once
// A Hugging Face repository found in the local hub cache, laid out as huggingface_hub writes it:
// models--OWNER--NAME/refs/REVISION holds a commit hash, snapshots/HASH/ holds that commit's files.
// So `config import-hf owner/name` works for a model downloaded before, and never needs the network.
#include <QString>

#include <optional>
#include <string>

namespace pb {

struct HfRepoId {
    QString owner;
    QString name;
    QString revision;  // branch, tag or commit hash; "" when not given (main)

    QString id() const { return owner + QLatin1Char('/') + name; }
};

// `owner/name` or `owner/name@revision` with the characters the Hub allows; nullopt otherwise.
std::optional<HfRepoId> parseHfRepoId(const QString &text);

// The cache folder huggingface_hub uses, with what chose it (e.g. "$HF_HUB_CACHE"), for messages.
struct HfHubCacheDir {
    QString path;
    QString source;
};
// $HF_HUB_CACHE, else $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
HfHubCacheDir hfHubCacheDir();

struct HfCachedSnapshot {
    QString folder;      // .../snapshots/<commit>, holding config.json
    std::string commit;  // the commit hash the revision resolved to
};
// Throws InvalidInputError naming the repository id and the folders looked in when the revision
// (main when none is given) has no cached config.json.
HfCachedSnapshot findHfCachedSnapshot(const HfRepoId &repo, const HfHubCacheDir &cache = hfHubCacheDir());

} // namespace pb
