"""What the set-up's resolution forgets of an Ivy cache (engine.cli.jvm_packages), without a JVM:
caches laid out as Ivy 2.5 writes them (records copied from real ones). ``tests/e2e/test_setup.py``
resolves from Maven Central with a user's ``~/.m2`` that holds a POM without its jar."""

from __future__ import annotations

from pathlib import Path

from engine.cli import jvm_packages

POOL = "https\\://repo1.maven.org/maven2/org/apache/commons/commons-pool2/2.12.1/commons-pool2-2.12.1"
M2 = "file\\:/home/someone/.m2/repository/org/apache/commons/commons-pool2/2.12.1/commons-pool2-2.12.1"


def record(pom: str, jar: str | None, *, resolver: str = "central") -> str:
    """An ``ivydata-2.12.1.properties`` as Ivy writes it: where the POM and the jar came from."""
    lines = [
        "#ivy cached data file for org.apache.commons#commons-pool2;2.12.1",
        "#Wed Dec 02 00:51:29 UTC 2026",
        f"resolver={resolver}",
        f"artifact.resolver={resolver}",
        "artifact\\:ivy\\#ivy\\#xml\\#1945692221.is-local=false",
        f"artifact\\:ivy\\#ivy\\#xml\\#1945692221.location={pom}.pom",
        f"artifact\\:commons-pool2\\#pom.original\\#pom\\#-44324169.location={pom}.pom",
    ]
    if jar is not None:
        lines.append(f"artifact\\:commons-pool2\\#jar\\#jar\\#-1696886831.location={jar}.jar")
    return "\n".join(lines) + "\n"


def cache_with(ivy: Path, text: str, *, jar: bool = True) -> Path:
    """``ivy`` holding commons-pool2 2.12.1 with the record ``text`` (its jar, and a copy retrieved
    into ``<ivy>/jars``, when ``jar``); the module's folder."""
    module = ivy / "cache" / "org.apache.commons" / "commons-pool2"
    (module / "jars").mkdir(parents=True)
    for name in ("ivy-2.12.1.xml", "ivy-2.12.1.xml.original"):
        (module / name).write_text("<ivy-module/>")
    (module / "ivydata-2.12.1.properties").write_text(text)
    if jar:
        (module / "jars" / "commons-pool2-2.12.1.jar").write_bytes(b"PK jar")
        (ivy / "jars").mkdir()
        (ivy / "jars" / "org.apache.commons_commons-pool2-2.12.1.jar").write_bytes(b"PK jar")
    return module


def names(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def test_a_module_fetched_from_central_is_left_as_it_is(tmp_path: Path) -> None:
    cache_with(tmp_path, record(POOL, POOL))
    before = names(tmp_path)
    assert jvm_packages.forget_foreign(tmp_path) == []
    assert names(tmp_path) == before


def test_a_module_found_in_the_users_m2_is_forgotten(tmp_path: Path) -> None:
    """A POM found in ``~/.m2`` without its jar (no jar in the cache): its descriptor and record go,
    so the next resolution asks Maven Central (before the fix the cache sent it to ``~/.m2``)."""
    module = cache_with(tmp_path, record(M2, None, resolver="local-m2-cache"), jar=False)
    assert jvm_packages.forget_foreign(tmp_path) == ["org.apache.commons#commons-pool2;2.12.1"]
    assert names(module) == []


def test_a_relabelled_record_is_told_by_where_its_files_came_from(tmp_path: Path) -> None:
    """Resolved again with the project's settings, Ivy rewrites the record's resolver as
    ``central`` but keeps the POM it had from ``~/.m2``: the locations tell."""
    module = cache_with(tmp_path, record(M2, POOL, resolver="central"))
    assert jvm_packages.forget_foreign(tmp_path) == ["org.apache.commons#commons-pool2;2.12.1"]
    assert names(module) == ["jars/commons-pool2-2.12.1.jar"], "the jar came from Central: kept"
    assert (tmp_path / "jars" / "org.apache.commons_commons-pool2-2.12.1.jar").exists()


def test_a_jar_from_the_users_m2_goes_with_its_retrieved_copy(tmp_path: Path) -> None:
    module = cache_with(tmp_path, record(M2, M2, resolver="local-m2-cache"))
    assert jvm_packages.forget_foreign(tmp_path) == ["org.apache.commons#commons-pool2;2.12.1"]
    assert names(module) == [] and names(tmp_path / "jars") == []


def test_a_record_that_says_nowhere_is_forgotten(tmp_path: Path) -> None:
    module = cache_with(tmp_path, "resolver=central\n", jar=False)
    assert jvm_packages.forget_foreign(tmp_path) == ["org.apache.commons#commons-pool2;2.12.1"]
    assert names(module) == []


def test_forgetting_everything_keeps_only_the_files_from_central(tmp_path: Path) -> None:
    """After a failure: every descriptor and record goes, and Ivy's leftover resolution files and
    retrieved copies; of the downloaded files only those a record says came from Central stay
    (one no record names, of unknown origin, goes)."""
    module = cache_with(tmp_path, record(POOL, POOL))
    (module / "jars" / "stray-1.0.jar").write_bytes(b"PK")
    other = tmp_path / "cache" / "org.example" / "m2only"
    (other / "jars").mkdir(parents=True)
    m2_jar = "file\\:/home/someone/.m2/repository/org/example/m2only/1.0/m2only-1.0.jar"
    (other / "ivydata-1.0.properties").write_text(f"artifact\\:m2only\\#jar\\#jar\\#1.location={m2_jar}\n")
    (other / "jars" / "m2only-1.0.jar").write_bytes(b"PK")
    (tmp_path / "cache" / "resolved-org.apache.spark-spark-submit-parent-x-1.0.xml").write_text("")
    (tmp_path / "cache" / "org.apache.spark-spark-submit-parent-x-default.xml").write_text("")
    jvm_packages.forget_all(tmp_path)
    assert names(tmp_path) == ["cache/org.apache.commons/commons-pool2/jars/commons-pool2-2.12.1.jar"]


def test_records_are_read_as_java_properties(tmp_path: Path) -> None:
    path = tmp_path / "ivydata-2.12.1.properties"
    path.write_text(record(POOL, M2))
    found = jvm_packages._properties(path)
    assert found["resolver"] == "central"
    assert found["artifact:commons-pool2#jar#jar#-1696886831.location"].startswith("file:/home/someone/.m2/")
    assert sorted(jvm_packages._locations(path)) == sorted(
        [
            "https://repo1.maven.org/maven2/org/apache/commons/commons-pool2/2.12.1/commons-pool2-2.12.1.pom",
            "https://repo1.maven.org/maven2/org/apache/commons/commons-pool2/2.12.1/commons-pool2-2.12.1.pom",
            "file:/home/someone/.m2/repository/org/apache/commons/commons-pool2/2.12.1/commons-pool2-2.12.1.jar",
        ]
    )


def test_the_settings_name_maven_central_alone() -> None:
    settings = jvm_packages.settings_file().read_text().split("<ivysettings>", 1)[1]  # (after the comment)
    assert f'root="{jvm_packages.CENTRAL}"' in settings and settings.count("<ibiblio") == 1
    assert ".m2" not in settings and "file:" not in settings and "user.home" not in settings
